"""Default tolerances of ``tapejax.testing``: one row per dtype, one column per derivative order.

A tape derivative computed in dtype D is compared with a numerical one computed
in float64, so the error budget is D's rounding error through the forward and
backward passes (plus a float64 finite-difference error that is orders of
magnitude smaller). The table below is deliberately generous: a wrong rule is
off by a factor or a sign, far outside these bounds, while rounding stays well
inside them.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import MappingProxyType
from typing import Any

import ml_dtypes
import numpy as np

__all__ = ["TOLERANCES", "default_tolerance"]

# dtype name -> {order: (atol, rtol)}. An element passes when
# |tape - reference| <= atol + rtol * |reference| (see _check for how that
# bound carries over to directional checks).
_TABLE = {
    "float64": {1: (1e-8, 1e-6), 2: (1e-6, 1e-5)},
    "complex128": {1: (1e-8, 1e-6), 2: (1e-6, 1e-5)},
    "float32": {1: (1e-4, 1e-3), 2: (1e-3, 5e-3)},
    "complex64": {1: (1e-4, 1e-3), 2: (1e-3, 5e-3)},
    "float16": {1: (1e-2, 2e-2), 2: (5e-2, 5e-2)},
    "bfloat16": {1: (5e-2, 5e-2), 2: (1e-1, 1e-1)},
}

TOLERANCES = MappingProxyType({k: MappingProxyType(v) for k, v in _TABLE.items()})
"""Read-only view of the default ``(atol, rtol)`` per dtype name and derivative order.

Example:
    >>> from tapejax.testing import TOLERANCES
    >>> TOLERANCES["float32"][1]
    (0.0001, 0.001)
"""

# Loosest last: with several dtypes in play, the loosest one sets the budget.
_PRECISION_RANK = {"float64": 0, "complex128": 0, "float32": 1, "complex64": 1, "float16": 2, "bfloat16": 3}


def dtype_name(dt: Any) -> str:
    d = np.dtype(dt)
    if d == np.dtype(ml_dtypes.bfloat16):
        return "bfloat16"
    return d.name


def default_tolerance(dtypes: Iterable[Any], order: int) -> tuple[float, float, str]:
    """``(atol, rtol, dtype_name)`` for the loosest of ``dtypes`` at derivative ``order``.

    Example:
        >>> import numpy as np
        >>> from tapejax.testing import default_tolerance
        >>> default_tolerance([np.float32, np.float64], 1)
        (0.0001, 0.001, 'float32')
    """
    names = [dtype_name(d) for d in dtypes]
    names = [n for n in names if n in _TABLE]
    if not names:
        names = ["float32"]
    worst = max(names, key=lambda n: _PRECISION_RANK[n])
    row = _TABLE[worst]
    atol, rtol = row[min(max(int(order), 1), 2)]
    return atol, rtol, worst
