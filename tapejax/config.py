"""Runtime switches of tapejax (``tapejax.config``).

``explain_none_gradients``: when True, ``GradientTape.gradient`` issues a
``tapejax.NoneGradientWarning`` naming, for each source whose gradient is None,
the cause found by ``tapejax.explain``. Return values do not change. Off by
default; the environment variable ``TAPEJAX_EXPLAIN_NONE=1`` turns it on at import.

Example:
    >>> import tapejax as tf
    >>> tf.config.explain_none_gradients = True   # doctest: +SKIP
"""

from __future__ import annotations

import os

explain_none_gradients: bool = os.environ.get("TAPEJAX_EXPLAIN_NONE", "").strip().lower() not in ("", "0", "false", "no", "off")
