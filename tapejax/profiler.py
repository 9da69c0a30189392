"""``tf.profiler``: JAX's profiler under TF's names (``tf.profiler.experimental``).

``start(logdir)``/``stop()`` write a TensorBoard profile (``plugins/profile/...``) with
``jax.profiler``; ``Trace`` names a region of it.

Example:
    >>> import tapejax as tf
    >>> with tf.profiler.experimental.Trace("step", step_num=1):
    ...     y = tf.constant(1.0) + 1.0
"""

from __future__ import annotations

import types as _pytypes

from ._tf._summary import Profile, ProfilerOptions, Trace, profiler_start, profiler_stop

experimental = _pytypes.ModuleType("tapejax.profiler.experimental", "tf.profiler.experimental on jax.profiler.")
experimental.start = profiler_start  # type: ignore[attr-defined]
experimental.stop = profiler_stop  # type: ignore[attr-defined]
experimental.Trace = Trace  # type: ignore[attr-defined]
experimental.Profile = Profile  # type: ignore[attr-defined]
experimental.ProfilerOptions = ProfilerOptions  # type: ignore[attr-defined]

__all__ = ["experimental"]
