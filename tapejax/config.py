"""Runtime switches of tapejax (``tapejax.config``).

``explain_none_gradients``: when True, ``GradientTape.gradient`` issues a
``tapejax.NoneGradientWarning`` naming, for each source whose gradient is None,
the cause found by ``tapejax.explain``. Return values do not change. Off by
default; the environment variable ``TAPEJAX_EXPLAIN_NONE=1`` turns it on at import.

The replay tiers of an eager gradient (see ``compat_docs/performance.md``):

- ``replay_tier``: ``"auto"`` (default) interprets a slice seen for the first time
  op by op (each op's pullback a small kernel compiled once per op signature) and
  compiles a slice whole once it is hot; ``"interpret"`` and ``"compile"`` force one
  tier. Set at import by ``TAPEJAX_REPLAY_TIER``.
- ``replay_hot``: sightings after which a slice structure is hot (default 2).
- ``replay_background_compile``: compile a hot slice on a background thread while
  tier 0 answers (default True); ``replay_lag`` sightings later (default 8) the
  compiled program takes over, waiting for the compile if needed, so the switch
  point never depends on timing.
- ``replay_max_compile_eqns``: slices longer than this stay interpreted (default
  1000): a whole-slice compile grows faster than linearly with length.

Example:
    >>> import tapejax as tf
    >>> tf.config.explain_none_gradients = True   # doctest: +SKIP
"""

from __future__ import annotations

import os

explain_none_gradients: bool = os.environ.get("TAPEJAX_EXPLAIN_NONE", "").strip().lower() not in ("", "0", "false", "no", "off")


def _env_tier() -> str:
    raw = os.environ.get("TAPEJAX_REPLAY_TIER", "auto").strip().lower() or "auto"
    if raw not in ("auto", "interpret", "compile"):
        raise ValueError(
            f"TAPEJAX_REPLAY_TIER must be one of auto, interpret, compile; got {raw!r}. Unset it for the default (auto)."
        )
    return raw


replay_tier: str = _env_tier()
replay_hot: int = 2
replay_lag: int = 8
replay_background_compile: bool = True
replay_max_compile_eqns: int = 1000
