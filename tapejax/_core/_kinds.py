"""The numpy dtypes a gradient can flow through (floating and complex).

The recorder needs this set to decide which recorded outputs are
differentiable; it lives here, below the TF dtype layer
(``tapejax._ops._dtypes``), which re-uses it as ``INEXACT``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

# A frozenset of np.dtype makes the per-op "is this output differentiable?"
# test a single hash lookup.
INEXACT: frozenset[np.dtype] = frozenset(
    np.dtype(t) for t in (np.float16, np.float32, np.float64, ml_dtypes.bfloat16, np.complex64, np.complex128)
)
