"""AutoGraph (placeholder)."""
from __future__ import annotations
from typing import Any, Callable


def convert_for_trace(fn: Callable) -> Callable:
    return fn
