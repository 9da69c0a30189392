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

_run_eagerly = False


def run_functions_eagerly(run_eagerly: bool) -> None:
    """Run every ``tf.function`` as plain Python (TF's ``tf.config.run_functions_eagerly``), for debugging.

    Example:
        >>> import tapejax as tf
        >>> tf.config.run_functions_eagerly(True)
        >>> tf.config.functions_run_eagerly()
        True
        >>> tf.config.run_functions_eagerly(False)
    """
    global _run_eagerly
    _run_eagerly = bool(run_eagerly)


def functions_run_eagerly() -> bool:
    """Whether ``run_functions_eagerly(True)`` is in effect (TF's ``tf.config.functions_run_eagerly``).

    Example:
        >>> import tapejax as tf
        >>> tf.config.functions_run_eagerly()
        False
    """
    return _run_eagerly


explain_none_gradients: bool = os.environ.get("TAPEJAX_EXPLAIN_NONE", "").strip().lower() not in ("", "0", "false", "no", "off")
