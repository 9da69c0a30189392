"""The hypothesis profiles tapejax ships, and how one is selected.

Two profiles, defined here and nowhere else:

* ``tapejax-deterministic`` (the default of tapejax's own test suite):
  derandomized, so every run draws the same examples; no deadline, because the
  first call of a new shape compiles a replay (hundreds of milliseconds); no
  example database (a derandomized run has nothing to replay).
* ``tapejax-thorough``: random, 500 examples, no deadline; for a nightly or a
  pre-release run.

``TAPEJAX_HYPOTHESIS_PROFILE`` selects one: ``deterministic`` or ``thorough``
(the short names), ``ci`` (an older name of ``deterministic``), or the name of
any profile registered with hypothesis.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["PROFILE_ENV_VAR", "DETERMINISTIC", "THOROUGH", "register_profiles", "load_profile", "resolve_profile"]

PROFILE_ENV_VAR = "TAPEJAX_HYPOTHESIS_PROFILE"
DETERMINISTIC = "tapejax-deterministic"
THOROUGH = "tapejax-thorough"

_ALIASES = {"deterministic": DETERMINISTIC, "ci": DETERMINISTIC, "thorough": THOROUGH}


def register_profiles() -> None:
    """Register ``tapejax-deterministic`` and ``tapejax-thorough`` with hypothesis (idempotent).

    Example:
        >>> from hypothesis import settings
        >>> from tapejax.testing import register_profiles
        >>> register_profiles(); settings.get_profile("tapejax-deterministic").derandomize
        True
    """
    settings.register_profile(
        DETERMINISTIC,
        derandomize=True,
        deadline=None,
        max_examples=40,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    settings.register_profile(
        THOROUGH,
        derandomize=False,
        deadline=None,
        max_examples=500,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )


def resolve_profile(name: str) -> str:
    """The hypothesis profile name for a value of ``TAPEJAX_HYPOTHESIS_PROFILE`` (short names allowed)."""
    return _ALIASES.get(name.strip().lower(), name.strip())


def load_profile(name: str | None = None, default: str | None = "deterministic") -> str | None:
    """Register the profiles and load one: ``name``, else ``$TAPEJAX_HYPOTHESIS_PROFILE``, else ``default``.

    Returns the hypothesis profile name loaded, or None when nothing was
    selected (``default=None`` and no environment variable). An unknown name
    raises ``hypothesis.errors.InvalidArgument`` listing how to fix it.

    Example:
        >>> from tapejax.testing import load_profile
        >>> load_profile("deterministic")
        'tapejax-deterministic'
    """
    register_profiles()
    chosen = name or os.environ.get(PROFILE_ENV_VAR) or default
    if not chosen:
        return None
    full = resolve_profile(chosen)
    try:
        settings.get_profile(full)
    except Exception as e:  # hypothesis.errors.InvalidArgument
        raise type(e)(
            f"Unknown hypothesis profile {chosen!r} (from {PROFILE_ENV_VAR} or the caller). Use 'deterministic' or "
            "'thorough', or register the profile with hypothesis.settings.register_profile first."
        ) from e
    settings.load_profile(full)
    return full
