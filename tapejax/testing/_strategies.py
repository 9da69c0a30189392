"""Hypothesis strategies for tapejax, built on ``hypothesis.extra.numpy``.

Values are drawn as NumPy arrays by ``hypothesis.extra.numpy.arrays`` (which
does the shrinking, the shapes and the element generation) and then wrapped as
tensors or variables. What this module adds is the part specific to testing
derivatives: bounded elements, values kept away from the edges of a
function's domain (log, sqrt, division, inverse trig) by a margin larger than
the finite-difference stencil of ``check_gradients``, and ``assume``-based
helpers that skip points too close to a kink.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

__all__ = [
    "DOMAINS",
    "domain_intervals",
    "dtypes",
    "elements",
    "shapes",
    "arrays",
    "tensors",
    "variables",
    "broadcastable_shapes",
    "broadcastable_tensors",
    "assume_away_from_kinks",
    "assume_apart",
]

_BF16 = np.dtype(ml_dtypes.bfloat16)

DOMAINS = {
    "real": "[-M, M]",
    "positive": "[m, M]",
    "log": "[m, M]",
    "sqrt": "[m, M]",
    "rsqrt": "[m, M]",
    "reciprocal": "[-M, -m] U [m, M]",
    "division": "[-M, -m] U [m, M]",
    "nonzero": "[-M, -m] U [m, M]",
    "asin": "[-1 + m, 1 - m]",
    "acos": "[-1 + m, 1 - m]",
    "atanh": "[-1 + m, 1 - m]",
    "unit": "[-1 + m, 1 - m]",
    "acosh": "[1 + m, M]",
    "log1p": "[-1 + m, M]",
}
"""Named domains: the set each draws from, with ``m`` = margin (default 0.1) and ``M`` = max_magnitude (default 10).

The margin keeps values away from the domain's edge, where derivatives blow up
and a finite-difference stencil would step outside the domain.
"""


def domain_intervals(domain: str, margin: float = 0.1, max_magnitude: float = 10.0) -> list[tuple[float, float]]:
    """The closed intervals a named domain draws from (see ``DOMAINS``).

    Example:
        >>> from tapejax.testing.strategies import domain_intervals
        >>> domain_intervals("log")
        [(0.1, 10.0)]
    """
    m, big = float(margin), float(max_magnitude)
    if m < 0 or big <= 0:
        raise ValueError(f"margin must be >= 0 and max_magnitude > 0, got {margin!r} and {max_magnitude!r}.")
    table = {
        "real": [(-big, big)],
        "positive": [(m, big)],
        "log": [(m, big)],
        "sqrt": [(m, big)],
        "rsqrt": [(m, big)],
        "reciprocal": [(-big, -m), (m, big)],
        "division": [(-big, -m), (m, big)],
        "nonzero": [(-big, -m), (m, big)],
        "asin": [(-1 + m, 1 - m)],
        "acos": [(-1 + m, 1 - m)],
        "atanh": [(-1 + m, 1 - m)],
        "unit": [(-1 + m, 1 - m)],
        "acosh": [(1 + m, big)],
        "log1p": [(-1 + m, big)],
    }
    if domain not in table:
        raise ValueError(f"Unknown domain {domain!r}; choose one of {sorted(table)}.")
    out = [(lo, hi) for lo, hi in table[domain] if lo <= hi]
    if not out:
        raise ValueError(f"Domain {domain!r} is empty with margin={margin} and max_magnitude={max_magnitude}.")
    return out


# --- dtypes ---------------------------------------------------------------------


def _np_dtype(dtype: Any) -> np.dtype:
    from .._ops._dtypes import as_dtype

    return as_dtype(dtype)._np


def dtypes(names: Sequence[str] = ("float32",)) -> st.SearchStrategy:
    """Draw a tapejax ``DType`` among ``names`` (float64/complex128 need x64 when used).

    Example:
        >>> import tapejax as tf
        >>> from tapejax.testing.strategies import dtypes
        >>> dtypes(["float16", "float32"]).example() in (tf.float16, tf.float32)  # doctest: +SKIP
        True
    """
    from .._ops._dtypes import as_dtype

    return st.sampled_from([as_dtype(n) for n in names])


# --- elements --------------------------------------------------------------------------


def _step(c: np.generic, up: bool) -> np.generic:
    dt = np.dtype(type(c))
    if dt == _BF16:
        # bfloat16 has no nextafter: step the bit pattern (sign-magnitude).
        bits = np.array([c], dt).view(np.uint16)[0]
        positive = float(c) > 0 or (float(c) == 0 and up)
        if float(c) == 0:
            return np.array([np.uint16(0x0001 if up else 0x8001)], np.uint16).view(dt)[0]
        bits = bits + 1 if positive == up else bits - 1
        return np.array([bits], np.uint16).view(dt)[0]
    return np.nextafter(c, dt.type(np.inf if up else -np.inf))


def _inward(lo: float, hi: float, dt: np.dtype) -> tuple[float, float]:
    """The interval's bounds rounded inward to values representable in ``dt``."""
    a = np.array([lo]).astype(dt)[0]
    while float(a) < lo:
        a = _step(a, True)
    b = np.array([hi]).astype(dt)[0]
    while float(b) > hi:
        b = _step(b, False)
    if float(a) > float(b):
        raise ValueError(f"No {dt} value lies in [{lo}, {hi}].")
    return float(a), float(b)


def _gen_dtype(dt: np.dtype) -> np.dtype:
    # hypothesis does not know bfloat16: draw float32 (the bounds are
    # bfloat16-representable, so rounding to bfloat16 stays inside them).
    return np.dtype(np.float32) if dt == _BF16 else dt


def _width(dt: np.dtype) -> Any:  # 16, 32 or 64: hypothesis' Literal widths
    return {2: 16, 4: 32, 8: 64}[_gen_dtype(dt).itemsize]


def elements(
    dtype: Any = "float32",
    domain: str = "real",
    *,
    min_value: float | None = None,
    max_value: float | None = None,
    margin: float = 0.1,
    max_magnitude: float = 10.0,
) -> st.SearchStrategy:
    """Python numbers representable in ``dtype`` and inside ``domain`` (no NaN, inf or subnormals).

    ``min_value``/``max_value`` narrow the domain further. Complex dtypes
    support only ``domain="real"`` (magnitude at most ``max_magnitude``);
    integer and bool dtypes give bounded integers and booleans.

    Example:
        >>> from tapejax.testing.strategies import elements
        >>> s = elements("float32", "asin")  # values in [-0.9, 0.9]
    """
    dt = _np_dtype(dtype)
    if dt.kind == "b":
        return st.booleans()
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return st.integers(int(max(info.min, -max_magnitude if min_value is None else min_value)),
                           int(min(info.max, max_magnitude if max_value is None else max_value)))
    if dt.kind == "c":
        if domain != "real":
            raise ValueError(f"Complex elements support only domain='real', got {domain!r}.")
        width: Any = dt.itemsize * 8  # 64 or 128, as hypothesis' Literal wants
        return st.complex_numbers(max_magnitude=max_magnitude, allow_nan=False, allow_infinity=False,
                                  allow_subnormal=False, width=width)
    parts = []
    for lo, hi in domain_intervals(domain, margin, max_magnitude):
        if min_value is not None:
            lo = max(lo, float(min_value))
        if max_value is not None:
            hi = min(hi, float(max_value))
        if lo > hi:
            continue
        a, b = _inward(lo, hi, dt)
        parts.append(st.floats(a, b, allow_nan=False, allow_infinity=False, allow_subnormal=False, width=_width(dt)))
    if not parts:
        raise ValueError(f"min_value/max_value leave nothing of domain {domain!r}.")
    return parts[0] if len(parts) == 1 else st.one_of(*parts)


# --- arrays, tensors, variables -----------------------------------------------------------


def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 1, max_side: int = 4) -> st.SearchStrategy:
    """Array shapes (``hypothesis.extra.numpy.array_shapes``, but allowing rank 0 by default)."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def _as_strategy(v: Any) -> st.SearchStrategy:
    return v if isinstance(v, st.SearchStrategy) else st.just(v)


@st.composite
def arrays(
    draw: Any,
    dtype: Any = "float32",
    shape: Any = None,
    *,
    domain: str = "real",
    elements_strategy: st.SearchStrategy | None = None,
    min_value: float | None = None,
    max_value: float | None = None,
    margin: float = 0.1,
    max_magnitude: float = 10.0,
    max_dims: int = 3,
    max_side: int = 4,
) -> np.ndarray:
    """NumPy arrays of ``dtype`` and ``shape`` (either may be a strategy; shape None: drawn) in ``domain``."""
    dt = _np_dtype(draw(_as_strategy(dtype)))
    shp = draw(shapes(0, max_dims, 1, max_side)) if shape is None else draw(_as_strategy(shape))
    if isinstance(shp, int):
        shp = (shp,)
    elems = elements_strategy or elements(dt, domain, min_value=min_value, max_value=max_value, margin=margin,
                                          max_magnitude=max_magnitude)
    a = draw(hnp.arrays(_gen_dtype(dt), tuple(shp), elements=elems))
    return a.astype(dt) if dt == _BF16 else a


def tensors(dtype: Any = "float32", shape: Any = None, **kwargs: Any) -> st.SearchStrategy:
    """``tf.Tensor`` values: ``arrays(dtype, shape, **kwargs)`` wrapped by ``tf.constant``.

    Keyword arguments: ``domain`` (see ``DOMAINS``), ``min_value``,
    ``max_value``, ``margin``, ``max_magnitude``, ``elements_strategy``,
    ``max_dims``, ``max_side``.

    Example:
        >>> from hypothesis import given
        >>> from tapejax.testing import strategies as tst
        >>> @given(tst.tensors(shape=(3,), domain="log"))
        ... def test_log_positive(x):
        ...     assert float(x.numpy().min()) >= 0.1
    """
    from .._ops._tensor import constant

    return arrays(dtype, shape, **kwargs).map(constant)


def variables(dtype: Any = "float32", shape: Any = None, *, trainable: bool = True, **kwargs: Any) -> st.SearchStrategy:
    """``tf.Variable`` values (same options as ``tensors``)."""
    from .._tf._variable import Variable

    return arrays(dtype, shape, **kwargs).map(lambda a: Variable(a, trainable=trainable))


def broadcastable_shapes(num_shapes: int = 2, *, base_shape: tuple = (), min_dims: int = 0, max_dims: int = 3,
                         max_side: int = 4) -> st.SearchStrategy:
    """Tuples of mutually broadcastable shapes (``hypothesis.extra.numpy.mutually_broadcastable_shapes``).

    Each draw is ``(input_shapes, result_shape)``.
    """
    return hnp.mutually_broadcastable_shapes(num_shapes=num_shapes, base_shape=base_shape, min_dims=min_dims,
                                             max_dims=max_dims, min_side=1, max_side=max_side)


@st.composite
def broadcastable_tensors(
    draw: Any,
    num_shapes: int = 2,
    *,
    dtype: Any = "float32",
    domains: str | Sequence[str] = "real",
    base_shape: tuple = (),
    min_dims: int = 0,
    max_dims: int = 3,
    max_side: int = 4,
    as_variables: bool = False,
    **kwargs: Any,
) -> tuple:
    """A tuple of ``num_shapes`` tensors whose shapes broadcast together (one drawn dtype for all).

    ``domains`` is one domain for every argument or one per argument (say
    ``("real", "division")`` for ``x / y``).

    Example:
        >>> from hypothesis import given
        >>> from tapejax.testing import strategies as tst
        >>> @given(tst.broadcastable_tensors(2, domains=("real", "division")))
        ... def test_div(args):
        ...     x, y = args
    """
    doms = [domains] * num_shapes if isinstance(domains, str) else list(domains)
    if len(doms) != num_shapes:
        raise ValueError(f"domains has {len(doms)} entries for {num_shapes} tensors.")
    dt = draw(_as_strategy(dtype))
    shps = draw(broadcastable_shapes(num_shapes, base_shape=base_shape, min_dims=min_dims, max_dims=max_dims,
                                     max_side=max_side))
    from .._ops._tensor import constant
    from .._tf._variable import Variable

    wrap = Variable if as_variables else constant
    return tuple(wrap(draw(arrays(dt, s, domain=d, **kwargs))) for s, d in zip(shps.input_shapes, doms))


# --- kinks ------------------------------------------------------------------------------------


def _values(v: Any) -> np.ndarray:
    from .._core._recorder import Tensor, VariableBase

    if isinstance(v, Tensor | VariableBase):
        v = v._value
    return np.asarray(v).astype(np.float64) if np.asarray(v).dtype.kind != "c" else np.asarray(v)


def assume_away_from_kinks(*values: Any, kinks: Sequence[float] = (0.0,), margin: float | None = None) -> bool:
    """``hypothesis.assume`` that every element of ``values`` is farther than ``margin`` from every kink.

    Use it in front of a check of a function with a kink (``relu``, ``abs`` at
    0; ``relu6`` at 0 and 6): there the one-sided derivatives differ, and a
    finite-difference stencil straddling the kink measures their average. The
    default margin, ``0.01 * max(1, |kink|)``, exceeds the reach of
    ``check_gradients``'s stencil (``2 * step * max(|x|, 0.1)`` with step 1e-3).
    Returns True (for use in expressions) when the example is kept.

    Example:
        >>> from hypothesis import given
        >>> import tapejax as tf
        >>> from tapejax.testing import check_gradients, strategies as tst
        >>> @given(tst.tensors(shape=(3,)))
        ... def test_relu(x):
        ...     tst.assume_away_from_kinks(x)
        ...     check_gradients(tf.nn.relu, (x,))
    """
    for v in values:
        a = _values(v)
        for c in kinks:
            m = 0.01 * max(1.0, abs(float(c))) if margin is None else float(margin)
            assume(bool(np.all(np.abs(a - float(c)) > m)))
    return True


def assume_apart(a: Any, b: Any, margin: float = 0.01) -> bool:
    """``hypothesis.assume`` that ``a`` and ``b`` differ by more than ``margin`` everywhere (broadcast).

    For the ties of ``maximum``/``minimum``, where the derivative jumps from
    one argument to the other.
    """
    assume(bool(np.all(np.abs(_values(a) - _values(b)) > margin)))
    return True
