"""``tapejax.testing``: check tape derivatives against numerical and analytic ones.

* ``check_gradients(fn, args, order=1|2, modes=("rev", "fwd"))``: tape
  gradients, jacobians and forward derivatives against float64 finite
  differences, with a report naming the argument, the worst element, both
  values and the tolerance.
* ``assert_matches_analytic(fn, dfn, args)``: the tape gradient against the
  user's own derivative formula (nested structures allowed).
* ``strategies``: hypothesis strategies for tensors, variables, broadcastable
  argument tuples, domain-safe values and kinks (needs ``hypothesis``).
* Property helpers for tape semantics: ``assert_zero_vs_none``,
  ``assert_persistent_repeatable``, ``assert_jacobian_matches_gradients``,
  ``assert_batch_jacobian_matches_jacobian``.
* Hypothesis profiles ``deterministic`` and ``thorough`` (``load_profile``;
  environment variable ``TAPEJAX_HYPOTHESIS_PROFILE``; pytest plugin).

See ``compat_docs/testing.md`` for a worked guide.

Example:
    >>> import tapejax as tf
    >>> from tapejax.testing import assert_matches_analytic
    >>> assert_matches_analytic(lambda x: x ** 3, lambda x: 3 * x ** 2, (tf.constant([1.0, 2.0]),))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._analytic import assert_matches_analytic
from ._check import GradientCheckError, GradientCheckResult, Mismatch, check_gradients
from ._properties import (
    assert_batch_jacobian_matches_jacobian,
    assert_jacobian_matches_gradients,
    assert_persistent_repeatable,
    assert_zero_vs_none,
)
from ._tolerances import TOLERANCES, default_tolerance

if TYPE_CHECKING:
    # Loaded lazily at run time (__getattr__ below: they need hypothesis); imported here so a
    # checker sees the names __all__ exports.
    from . import strategies
    from ._profiles import PROFILE_ENV_VAR, load_profile, register_profiles

__all__ = [
    "check_gradients",
    "assert_matches_analytic",
    "GradientCheckError",
    "GradientCheckResult",
    "Mismatch",
    "TOLERANCES",
    "default_tolerance",
    "assert_zero_vs_none",
    "assert_persistent_repeatable",
    "assert_jacobian_matches_gradients",
    "assert_batch_jacobian_matches_jacobian",
    "strategies",
    "register_profiles",
    "load_profile",
    "PROFILE_ENV_VAR",
]

_LAZY = {"register_profiles", "load_profile", "PROFILE_ENV_VAR", "DETERMINISTIC", "THOROUGH"}


def __getattr__(name: str) -> Any:
    # hypothesis is a test-time dependency: import it only when its parts are asked for.
    import importlib

    if name == "strategies":
        return importlib.import_module(__name__ + ".strategies")
    if name in _LAZY:
        return getattr(importlib.import_module(__name__ + "._profiles"), name)
    raise AttributeError(f"module 'tapejax.testing' has no attribute {name!r}")
