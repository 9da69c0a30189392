"""Keep the library's import-time objects out of Python's full garbage collections.

Why: CPython's cycle collector walks every tracked object of the oldest generation on each
full collection. JAX's modules leave about 95,000 such objects, tapejax's about 30,000 more,
Keras 3 about 120,000 more. Nothing in that heap is ever garbage (a collection right after
``import tapejax`` or ``import tapejax.keras`` finds none), yet walking it takes 45-110 ms on a
slow CPU. An eager training or solver loop allocates many short-lived containers per op
(tensors, the tape's equations); those that are alive at a young collection age into the oldest
generation and trigger a full collection every few dozen steps. On the Euler loop benchmark that
was 20-25% of a long loop's time (compat_docs/performance.md, "Garbage collection").

``gc.freeze()`` at the end of the import moves every object tracked at that moment into the
permanent generation, which collections skip. Objects created later (every tensor, variable,
tape and model) are collected as before. What it costs: an object alive at that moment that
later becomes part of unreachable cyclic garbage is never reclaimed (``gc.unfreeze()`` undoes the
freeze). Set ``TAPEJAX_GC_FREEZE=0`` before the import to leave the collector alone.
"""

from __future__ import annotations

import gc
import os

__all__ = ["freeze_import_heap", "enabled"]


def enabled() -> bool:
    """Whether the import freezes its objects (``TAPEJAX_GC_FREEZE``, on unless ``0``/``false``/``no``/``off``)."""
    return os.environ.get("TAPEJAX_GC_FREEZE", "").strip().lower() not in ("0", "false", "no", "off")


def freeze_import_heap() -> None:
    """``gc.freeze()`` unless ``TAPEJAX_GC_FREEZE`` says not to (module docstring: why)."""
    if enabled():
        gc.freeze()
