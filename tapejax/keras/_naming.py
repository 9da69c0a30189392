"""Keras's automatic object names: ``dense``, ``dense_1``, ... per snake-cased class name."""

from __future__ import annotations

import re
import threading

_lock = threading.Lock()
_counts: dict[str, int] = {}


def to_snake_case(name: str) -> str:
    """``AdamW`` -> ``adam_w``, ``RMSprop`` -> ``rm_sprop`` (Keras's spelling of class names)."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    name = re.sub("([a-z])([A-Z])", r"\1_\2", name)
    return name.lower()


def auto_name(prefix: str) -> str:
    """A fresh name: the first object of a kind gets ``prefix``, later ones ``prefix_1``, ``prefix_2``..."""
    prefix = to_snake_case(prefix)
    with _lock:
        n = _counts.get(prefix, 0)
        _counts[prefix] = n + 1
    return prefix if n == 0 else f"{prefix}_{n}"


def reset() -> None:
    with _lock:
        _counts.clear()
