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


# ---- devices (tf.config.list_physical_devices / list_logical_devices) ----------------------------

import collections  # noqa: E402
from typing import Any  # noqa: E402

PhysicalDevice = collections.namedtuple("PhysicalDevice", ["name", "device_type"])
LogicalDevice = collections.namedtuple("LogicalDevice", ["name", "device_type"])


def _jax_devices(device_type: Any) -> list:
    import jax  # here, not at the top: reading tapejax.config must not start JAX's backends

    kinds = {"CPU": "cpu", "GPU": "gpu", "TPU": "tpu"}
    wanted = [k for k in kinds if device_type is None or k == str(device_type).upper()]
    out = []
    for k in wanted:
        try:
            out += [(k, i) for i, _ in enumerate(jax.devices(kinds[k]))]
        except RuntimeError:
            pass  # no backend of this kind
    return out


def list_physical_devices(device_type: Any = None) -> list:
    """The devices JAX sees, as TF names them (``/physical_device:CPU:0``).

    Example:
        >>> import tapejax as tf
        >>> tf.config.list_physical_devices("CPU")[0].device_type
        'CPU'
    """
    return [PhysicalDevice(f"/physical_device:{k}:{i}", k) for k, i in _jax_devices(device_type)]


def list_logical_devices(device_type: Any = None) -> list:
    """The devices JAX sees, as TF's logical devices (``/device:CPU:0``).

    Example:
        >>> import tapejax as tf
        >>> tf.config.list_logical_devices("CPU")[0].name
        '/device:CPU:0'
    """
    return [LogicalDevice(f"/device:{k}:{i}", k) for k, i in _jax_devices(device_type)]
