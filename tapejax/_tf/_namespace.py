"""Fill a TF-named namespace module (``tf.math``, ``tf.nn``, ...) from the op table."""

from __future__ import annotations

from typing import Any

from .. import _ops  # noqa: F401  (every family registered, so the table is complete)
from .._ops._machinery import EXPORTS


def populate(namespace: dict[str, Any], prefix: str) -> list[str]:
    """Copy every op exported as ``prefix.NAME`` into ``namespace``; return the names."""
    p = prefix + "." if prefix else ""
    names = []
    for full, fn in EXPORTS.items():
        if full.startswith(p) and "." not in full[len(p):]:
            namespace[full[len(p):]] = fn
            names.append(full[len(p):])
    return sorted(names)
