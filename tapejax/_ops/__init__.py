"""Layer 3, the op library: TF-signature functions over ``jax.numpy``/``jax.lax``.

Bottom to top (a module imports only modules listed before it):

* ``_tfgrad``: TF's gradient conventions as ``custom_jvp`` rules.
* ``_dtypes``: ``DType`` and the x64 rule; ``_tensor``: the Tensor surface
  (``convert_to_tensor``, ``TensorShape``, ``constant``, printing).
* ``_machinery``: the registration machinery (``prim``, ``define``, ``unary``,
  ``binary``, dtype rules, the ``PRIMS``/``OPS``/``EXPORTS`` tables), the
  elementwise ops and the reductions.
* the families, which only use the machinery: ``math``, ``array``, ``linalg``,
  ``random``, ``nn``, ``debugging``;
* ``operators``: sets ``+``, ``@``, ``[]``, ``==``, ... on Tensor and Variable;
* ``_gradfns``: TF's gradient functions written with these primitives, for the
  interpreted tier (on arrays they reuse the forward pass's kernels; bound under an
  outer tape they are the recorded gradient ops a second derivative differentiates).

Importing this package imports every family, so the tables are complete.
"""

from __future__ import annotations

from . import _machinery  # noqa: F401
from . import math, array, linalg, nn, debugging, image, strings  # noqa: F401  (register into the tables, in this order)
from . import operators, random  # noqa: F401  (operators: last, it reads the complete table)
from . import _gradfns  # noqa: F401  (attaches its rules to the registered primitives)
